// Package money handles the order system's amounts without floating point:
// an amount is a decimal string with at most two decimals ("150.00") on
// the wire and an integer count of minor units (15000 cents) in code and in
// events. It also holds the fixed set of accepted currencies.
package money

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Errors of [ParseAmount]. Each says which rule the text breaks; callers
// branch on them with errors.Is.
var (
	// ErrSyntax: the text is not a plain decimal number such as "150" or
	// "150.5" (no sign other than '-', no exponent, no spaces, no
	// thousands separators, digits on both sides of the point).
	ErrSyntax = errors.New("money: not a decimal number")
	// ErrNegative: the amount is below zero.
	ErrNegative = errors.New("money: negative amount")
	// ErrPrecision: the amount has more than two decimals.
	ErrPrecision = errors.New("money: more than two decimals")
	// ErrRange: the amount is above [MaxAmountMinor] minor units.
	ErrRange = errors.New("money: amount too large")
)

// MaxAmountMinor is the largest amount accepted, in minor units:
// 999,999,999.99. It keeps every amount exact in a JSON number, even for
// readers that hold numbers as float64 (below 2^53).
const MaxAmountMinor int64 = 99_999_999_999

// maxIntegerDigits is the number of digits before the point that
// MaxAmountMinor allows.
const maxIntegerDigits = 9

// ParseAmount parses a decimal string with at most two decimals ("150",
// "150.5", "150.00") into minor units (15000). The error wraps
// [ErrSyntax], [ErrNegative], [ErrPrecision] or [ErrRange], checked in that
// order.
func ParseAmount(s string) (int64, error) {
	digits := s
	negative := strings.HasPrefix(digits, "-")
	if negative {
		digits = digits[1:]
	}
	whole, frac, hasPoint := strings.Cut(digits, ".")
	if whole == "" || (hasPoint && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	if negative && strings.Trim(whole+frac, "0") != "" {
		return 0, fmt.Errorf("%w: %s", ErrNegative, s)
	}
	if len(frac) > 2 {
		return 0, fmt.Errorf("%w: %s", ErrPrecision, s)
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > maxIntegerDigits {
		return 0, fmt.Errorf("%w: %s is above %s", ErrRange, s, FormatAmount(MaxAmountMinor))
	}
	frac += strings.Repeat("0", 2-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64) // at most 11 digits: cannot overflow
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return n, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatAmount formats minor units as a decimal string with exactly two
// decimals: 15000 is "150.00", 5 is "0.05".
func FormatAmount(minor int64) string {
	sign := ""
	if minor < 0 {
		sign = "-"
		minor = -minor
	}
	return fmt.Sprintf("%s%d.%02d", sign, minor/100, minor%100)
}

// currencies are the ISO 4217 codes the order system accepts, sorted. All
// have two minor digits, so "at most two decimals" is exact for each of
// them; currencies with none (JPY) or three (KWD) are deliberately absent.
var currencies = []string{
	"AUD", "BGN", "BRL", "CAD", "CHF", "CNY", "CZK", "DKK", "EUR", "GBP", "HKD",
	"INR", "MXN", "NOK", "NZD", "PLN", "RON", "SEK", "SGD", "USD", "ZAR",
}

// Currencies returns the accepted ISO 4217 currency codes, sorted.
func Currencies() []string { return slices.Clone(currencies) }

// IsCurrency reports whether code is an accepted currency: one of
// [Currencies], in upper case.
func IsCurrency(code string) bool {
	_, found := slices.BinarySearch(currencies, code)
	return found
}
