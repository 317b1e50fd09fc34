package money_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/outbox-dev/outbox/examples/orders/money"
)

func TestParseAmount_AcceptsDecimalsUpToTwoPlaces(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"150.00": 15000, "150": 15000, "150.5": 15050, "0.05": 5, "0": 0, "0.00": 0,
		"-0": 0, "-0.00": 0, "007.10": 710, "999999999.99": money.MaxAmountMinor,
	} {
		got, err := money.ParseAmount(in)
		if err != nil || got != want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseAmount_NamesTheBrokenRule(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]error{
		"":              money.ErrSyntax,
		"abc":           money.ErrSyntax,
		"1.":            money.ErrSyntax,
		".5":            money.ErrSyntax,
		"+1":            money.ErrSyntax,
		"1e3":           money.ErrSyntax,
		" 1":            money.ErrSyntax,
		"1,000.00":      money.ErrSyntax,
		"1.2.3":         money.ErrSyntax,
		"-":             money.ErrSyntax,
		"١٢":            money.ErrSyntax, // Arabic-Indic digits are not ASCII digits
		"-1":            money.ErrNegative,
		"-0.001":        money.ErrNegative,
		"1.001":         money.ErrPrecision,
		"0.000":         money.ErrPrecision,
		"1000000000":    money.ErrRange,
		"1000000000.00": money.ErrRange,
	} {
		_, err := money.ParseAmount(in)
		if !errors.Is(err, want) {
			t.Errorf("ParseAmount(%q) error = %v; want %v", in, err, want)
		}
	}
}

func TestFormatAmount_RoundTripsParseAmount(t *testing.T) {
	t.Parallel()
	for _, minor := range []int64{0, 1, 5, 10, 99, 100, 15000, 15050, money.MaxAmountMinor} {
		s := money.FormatAmount(minor)
		back, err := money.ParseAmount(s)
		if err != nil || back != minor {
			t.Errorf("ParseAmount(FormatAmount(%d) = %q) = %d, %v", minor, s, back, err)
		}
	}
	if got := money.FormatAmount(-5); got != "-0.05" {
		t.Errorf("FormatAmount(-5) = %q; want -0.05", got)
	}
}

func TestIsCurrency_AcceptsOnlyTheListedUpperCaseCodes(t *testing.T) {
	t.Parallel()
	for _, c := range money.Currencies() {
		if !money.IsCurrency(c) {
			t.Errorf("IsCurrency(%q) = false for a listed currency", c)
		}
	}
	for _, c := range []string{"", "eur", "EURO", "XXX", "JPY", "KWD", "EU"} {
		if money.IsCurrency(c) {
			t.Errorf("IsCurrency(%q) = true", c)
		}
	}
	if !slices.IsSorted(money.Currencies()) {
		t.Error("Currencies() is not sorted; IsCurrency's binary search needs it")
	}
}

func ExampleParseAmount() {
	cents, err := money.ParseAmount("150.5")
	fmt.Println(cents, err)
	_, err = money.ParseAmount("150.555")
	fmt.Println(errors.Is(err, money.ErrPrecision))
	fmt.Println(money.FormatAmount(cents))
	// Output:
	// 15050 <nil>
	// true
	// 150.50
}
