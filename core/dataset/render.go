package dataset

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// value is row i of column a as a JSON value, rendered as pyarrow reads
// the same file (TestAgainstPyarrow): text as text; binary as standard
// base64; dates, times and timestamps in ISO 8601 as Python's isoformat
// writes them (a timestamp with a time zone at its offset there);
// decimals in plain notation with all their scale digits, as strings
// (JSON numbers would lose them); NaN and infinities, which JSON lacks,
// as null (as datasets' to_json writes them); a map as an object.
func value(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return a.Value(i), nil
	case *array.Int16:
		return a.Value(i), nil
	case *array.Int32:
		return a.Value(i), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Uint8:
		return a.Value(i), nil
	case *array.Uint16:
		return a.Value(i), nil
	case *array.Uint32:
		return a.Value(i), nil
	case *array.Uint64:
		return a.Value(i), nil
	case *array.Float16:
		return finite(float64(a.Value(i).Float32()), float32(a.Value(i).Float32())), nil
	case *array.Float32:
		return finite(float64(a.Value(i)), a.Value(i)), nil
	case *array.Float64:
		return finite(a.Value(i), a.Value(i)), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.StringView:
		return a.Value(i), nil
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i)), nil
	case *array.LargeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i)), nil
	case *array.BinaryView:
		return base64.StdEncoding.EncodeToString(a.Value(i)), nil
	case *array.FixedSizeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i)), nil
	case *array.Date32:
		return a.Value(i).ToTime().Format("2006-01-02"), nil
	case *array.Date64:
		return a.Value(i).ToTime().Format("2006-01-02"), nil
	case *array.Timestamp:
		t := a.DataType().(*arrow.TimestampType)
		return timestamp(int64(a.Value(i)), t.Unit, t.TimeZone)
	case *array.Time32:
		u := a.DataType().(*arrow.Time32Type).Unit
		return timeOfDay(int64(a.Value(i)), u), nil
	case *array.Time64:
		u := a.DataType().(*arrow.Time64Type).Unit
		return timeOfDay(int64(a.Value(i)), u), nil
	case *array.Decimal32:
		return scaled(big.NewInt(int64(a.Value(i))), int(a.DataType().(*arrow.Decimal32Type).Scale)), nil
	case *array.Decimal64:
		return scaled(big.NewInt(int64(a.Value(i))), int(a.DataType().(*arrow.Decimal64Type).Scale)), nil
	case *array.Decimal128:
		return scaled(a.Value(i).BigInt(), int(a.DataType().(*arrow.Decimal128Type).Scale)), nil
	case *array.Decimal256:
		return scaled(a.Value(i).BigInt(), int(a.DataType().(*arrow.Decimal256Type).Scale)), nil
	case *array.Dictionary:
		return value(a.Dictionary(), a.GetValueIndex(i))
	case *array.Map: // before *array.List, which it embeds
		keys, items := a.Keys(), a.Items()
		lo, hi := a.ValueOffsets(i)
		m := make(map[string]any, hi-lo)
		for j := int(lo); j < int(hi); j++ {
			k, err := value(keys, j)
			if err != nil {
				return nil, err
			}
			v, err := value(items, j)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = v
		}
		return m, nil
	case array.ListLike:
		lo, hi := a.ValueOffsets(i)
		l := make([]any, 0, hi-lo)
		for j := int(lo); j < int(hi); j++ {
			v, err := value(a.ListValues(), j)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", j-int(lo), err)
			}
			l = append(l, v)
		}
		return l, nil
	case *array.Struct:
		t := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for f := range a.NumField() {
			v, err := value(a.Field(f), i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.Field(f).Name, err)
			}
			m[t.Field(f).Name] = v
		}
		return m, nil
	case array.ExtensionArray:
		return value(a.Storage(), i)
	}
	return nil, fmt.Errorf("columns of type %s are not supported", a.DataType())
}

// finite is v, or nil for NaN and infinities. f is the value as JSON
// writes it (a float32 keeps its shortest form).
func finite(v float64, f any) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return f
}

// timestamp is Python's isoformat of c units since the epoch: wall-clock
// time without a zone, or the local time and offset in zone tz.
func timestamp(c int64, u arrow.TimeUnit, tz string) (string, error) {
	sec, nsec, digits := split(c, u)
	t := time.Unix(sec, nsec).UTC()
	if tz == "" {
		return t.Format("2006-01-02T15:04:05") + fraction(nsec, digits), nil
	}
	loc, err := zone(tz)
	if err != nil {
		return "", err
	}
	t = t.In(loc)
	return t.Format("2006-01-02T15:04:05") + fraction(nsec, digits) + t.Format("-07:00"), nil
}

// zone is an Arrow time zone: a name from the tz database or a fixed
// offset ("+05:30").
func zone(tz string) (*time.Location, error) {
	if tz == "UTC" || tz == "Z" || tz == "utc" {
		return time.UTC, nil
	}
	if len(tz) == 6 && (tz[0] == '+' || tz[0] == '-') && tz[3] == ':' {
		t, err := time.Parse("-07:00", tz)
		if err == nil {
			_, off := t.Zone()
			return time.FixedZone(tz, off), nil
		}
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	return loc, nil
}

func timeOfDay(c int64, u arrow.TimeUnit) string {
	sec, nsec, digits := split(c, u)
	return time.Unix(sec, nsec).UTC().Format("15:04:05") + fraction(nsec, digits)
}

// split is c units since the epoch as seconds and nanoseconds, and the
// digits of a fraction of that unit.
func split(c int64, u arrow.TimeUnit) (sec, nsec int64, digits int) {
	per, digits := int64(1), 0
	switch u {
	case arrow.Millisecond:
		per, digits = 1000, 3
	case arrow.Microsecond:
		per, digits = 1_000_000, 6
	case arrow.Nanosecond:
		per, digits = 1_000_000_000, 9
	}
	sec, rem := c/per, c%per
	if rem < 0 {
		sec, rem = sec-1, rem+per
	}
	return sec, rem * (1_000_000_000 / per), digits
}

// fraction is Python's isoformat of a fraction of a second: none when it
// is zero, else six digits (microseconds), or nine where the unit is
// nanoseconds and the microseconds do not hold it (pandas' Timestamp).
func fraction(nsec int64, digits int) string {
	switch {
	case nsec == 0:
		return ""
	case digits == 9 && nsec%1000 != 0:
		return fmt.Sprintf(".%09d", nsec)
	}
	return fmt.Sprintf(".%06d", nsec/1000)
}

// scaled writes i / 10^scale in plain notation with scale digits after the point.
func scaled(i *big.Int, scale int) string {
	s := new(big.Int).Abs(i).String()
	sign := ""
	if i.Sign() < 0 {
		sign = "-"
	}
	if scale <= 0 {
		if i.Sign() == 0 {
			return "0"
		}
		return sign + s + strings.Repeat("0", -scale)
	}
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	return sign + s[:len(s)-scale] + "." + s[len(s)-scale:]
}
