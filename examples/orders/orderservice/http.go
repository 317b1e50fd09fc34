package orderservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The bounds HTTPServer sets on every connection.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 2 * time.Minute
)

// HTTPServer returns an http.Server for [Service.Handler] whose every
// connection is bounded: headers must arrive within ReadHeaderTimeout, the
// whole request within ReadTimeout, the response must be written within
// WriteTimeout, and a keep-alive connection idle for IdleTimeout is closed,
// so that slow or stalled clients cannot hold connections (and the
// database connections behind them) for ever. The server's own errors go
// to Config.Logger at warn level. Set Addr and call ListenAndServe, or
// call Serve with a listener.
func (s *Service) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// Handler returns the service's HTTP API (JSON in and out):
//
//	POST /orders              place an order: 201 with the order
//	GET  /orders/{id}         the order: 200, or 404
//	POST /orders/{id}/pay     PLACED -> PAID: 200 with the order, or 409
//	POST /orders/{id}/ship    PAID -> SHIPPED: 200, or 409
//	POST /orders/{id}/cancel  PLACED or PAID -> CANCELLED: 200, or 409
//
// POST /orders takes {"customerId": "...", "amount": "150.00",
// "currency": "EUR", "items": [{"sku": "...", "quantity": 2}]} with
// Content-Type application/json, and an optional Idempotency-Key header.
// A bad request gets 400 (or 413 for a body over Config.MaxBodyBytes, 415
// for another content type, 422 for an Idempotency-Key reused with another
// request) and {"error": "...", "field": "..."}; nothing is written then.
// Text is taken exactly as sent or refused: a string with bytes that are
// not UTF-8 or an unpaired surrogate escape gets 400 naming its field.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.handlePlace)
	mux.HandleFunc("GET /orders/{id}", s.handleGet)
	mux.HandleFunc("POST /orders/{id}/pay", s.handleTransition(s.Pay))
	mux.HandleFunc("POST /orders/{id}/ship", s.handleTransition(s.Ship))
	mux.HandleFunc("POST /orders/{id}/cancel", s.handleTransition(s.Cancel))
	return mux
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	// Field names the request field or header at fault, if one is.
	Field string `json:"field,omitempty"`
	// Status is the order's status, with 409.
	Status Status `json:"status,omitempty"`
}

func (s *Service) handlePlace(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, errorBody{Field: "Content-Type",
			Error: fmt.Sprintf("Content-Type must be application/json, not %q", r.Header.Get("Content-Type"))})
		return
	}
	tooLarge := errorBody{Field: "body", Error: fmt.Sprintf("body must be at most %d bytes", s.cfg.MaxBodyBytes)}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, tooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, tooLarge)
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Field: "body", Error: "body could not be read: " + err.Error()})
		return
	}
	req, err := decodePlaceOrder(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	order, replayed, err := s.Place(r.Context(), req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/orders/"+order.ID.String())
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, order)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.orderID(w, r)
	if !ok {
		return
	}
	order, err := s.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, order)
}

func (s *Service) handleTransition(do func(context.Context, uuid.UUID) (Order, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.orderID(w, r)
		if !ok {
			return
		}
		order, err := do(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, order)
	}
}

// orderID reads the {id} of the path; an id that is not a UUID names no
// order, so it gets 404.
func (s *Service) orderID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no order has the id %q", r.PathValue("id"))})
		return uuid.Nil, false
	}
	return id, true
}

// writeError answers err with its status code and a JSON error.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		fe *FieldError
		te *TransitionError
	)
	switch {
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fe.Error(), Field: fe.Field})
	case errors.Is(err, ErrIdempotencyKeyReused):
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Field: "Idempotency-Key",
			Error: "Idempotency-Key was already used for a different request"})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no order has the id %q", r.PathValue("id"))})
	case errors.As(err, &te):
		writeJSON(w, http.StatusConflict, errorBody{Error: te.Error(), Status: te.Status})
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		s.cfg.Logger.Debug("request cancelled", slog.String("path", r.URL.Path), slog.Any("error", err))
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		s.cfg.Logger.Error("request failed", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("order_id", r.PathValue("id")), slog.Any("error", err))
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"internal error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decodePlaceOrder reads the JSON of POST /orders. It checks the shape
// (an object with known fields of the right JSON types) and leaves the
// values' rules to Place. Text that decoding would change (bytes that are
// not UTF-8, unpaired surrogate escapes) is refused naming the field, or
// the body where no field holds it (a key given twice). Errors are
// *FieldError.
func decodePlaceOrder(body []byte) (PlaceOrder, error) {
	req, err := decodeFields(body)
	if err == nil && !utf8.Valid(body) {
		return req, &FieldError{Field: "body", Rule: "must be valid UTF-8"}
	}
	return req, err
}

// decodeFields is decodePlaceOrder but for the check of the whole body.
func decodeFields(body []byte) (PlaceOrder, error) {
	var req PlaceOrder
	obj, err := object(body, "body", "an order", []string{"customerId", "amount", "currency", "items"})
	if err != nil {
		return req, err
	}
	if req.CustomerID, err = str(obj, "customerId", "must be a string"); err != nil {
		return req, err
	}
	if req.Amount, err = str(obj, "amount", `must be a string such as "150.00" (not a JSON number, which may lose cents)`); err != nil {
		return req, err
	}
	if req.Currency, err = str(obj, "currency", `must be a string such as "EUR"`); err != nil {
		return req, err
	}
	raw, ok := obj["items"]
	if !ok || string(raw) == "null" {
		return req, nil
	}
	var lines []json.RawMessage
	if json.Unmarshal(raw, &lines) != nil {
		return req, &FieldError{Field: "items", Rule: "must be a list of {\"sku\": ..., \"quantity\": ...}"}
	}
	if len(lines) > MaxItems {
		return req, &FieldError{Field: "items", Rule: fmt.Sprintf("must have at most %d lines", MaxItems)}
	}
	req.Items = make([]Item, len(lines))
	for i, line := range lines {
		name := fmt.Sprintf("items[%d]", i)
		item, err := object(line, name, "an item", []string{"sku", "quantity"})
		if err != nil {
			return req, err
		}
		if req.Items[i].SKU, err = str(item, "sku", "must be a string"); err != nil {
			err.(*FieldError).Field = name + ".sku"
			return req, err
		}
		if q, ok := item["quantity"]; ok && json.Unmarshal(q, &req.Items[i].Quantity) != nil {
			return req, &FieldError{Field: name + ".quantity", Rule: "must be a whole number"}
		}
	}
	return req, nil
}

// object decodes a JSON object and refuses keys other than known.
func object(b []byte, field, what string, known []string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, &FieldError{Field: field, Rule: "must be a JSON object: " + what}
	}
	var unknown []string
	for k := range obj {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		name := unknown[0]
		if field != "body" {
			name = field + "." + name
		}
		return nil, &FieldError{Field: name, Rule: "is not a field of " + what + " (" + strings.Join(known, ", ") + ")"}
	}
	return obj, nil
}

// str reads the string field name of obj: "" when absent or null. A
// string that decoding would change is refused (see lossyRule), not
// stored changed.
func str(obj map[string]json.RawMessage, name, rule string) (string, error) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", &FieldError{Field: name, Rule: rule}
	}
	if r := lossyRule(raw); r != "" {
		return "", &FieldError{Field: name, Rule: r}
	}
	return v, nil
}

// lossyRule returns the rule that the JSON string raw breaks if
// encoding/json cannot decode it as it is: bytes that are not UTF-8, and
// escapes of unpaired UTF-16 surrogates (\ud800 to \udfff), both of which
// it replaces with U+FFFD without an error. It returns "" for a string that
// decodes to exactly what was sent. raw is a valid JSON string.
func lossyRule(raw []byte) string {
	if !utf8.Valid(raw) {
		return "must be valid UTF-8"
	}
	const unpaired = `must not hold an unpaired surrogate escape (\ud800 to \udfff)`
	s := string(raw)
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if s[i] != 'u' {
			continue
		}
		r := hexRune(s[i+1:])
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		// Only a high surrogate followed by an escaped low one is a
		// character.
		if !strings.HasPrefix(s[i+1:], `\u`) || utf16.DecodeRune(r, hexRune(s[i+3:])) == utf8.RuneError {
			return unpaired
		}
		i += 6
	}
	return ""
}

// hexRune is the value of the four hex digits that start s, or -1.
func hexRune(s string) rune {
	if len(s) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(s[:4], 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}
