-- Delete the claimed rows instead of marking them.
DELETE FROM outbox_messages WHERE seq = ANY (:seqs::bigint[]);
