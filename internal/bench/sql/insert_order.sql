-- One business row. $1 order id, $2 customer id, $3 amount.
INSERT INTO {{schema}}.bench_orders (id, customer_id, amount) VALUES ($1, $2, $3)
