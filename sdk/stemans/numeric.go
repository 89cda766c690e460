package stemans

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/prorl/prorl/sdk/mathans"
)

// dim is a unit's dimension: exponents of m, kg, s, A, K, mol, cd.
type dim [7]int8

type unit struct {
	scale float64 // to SI base units
	dim   dim
	// offset for temperatures (°C, °F): si = value*scale + offset
	offset float64
}

var (
	dLength  = dim{1}
	dMass    = dim{0, 1}
	dTime    = dim{0, 0, 1}
	dCurrent = dim{0, 0, 0, 1}
	dTemp    = dim{0, 0, 0, 0, 1}
	dAmount  = dim{0, 0, 0, 0, 0, 1}
	dLum     = dim{0, 0, 0, 0, 0, 0, 1}
	dEnergy  = dim{2, 1, -2}
	dForce   = dim{1, 1, -2}
	dPower   = dim{2, 1, -3}
	dPress   = dim{-1, 1, -2}
	dCharge  = dim{0, 0, 1, 1}
	dVolt    = dim{2, 1, -3, -1}
	dOhm     = dim{2, 1, -3, -2}
	dFarad   = dim{-2, -1, 4, 2}
	dTesla   = dim{0, 1, -2, -1}
	dHenry   = dim{2, 1, -2, -2}
	dWeber   = dim{2, 1, -2, -1}
	dSiemens = dim{-2, -1, 3, 2}
	dVolume  = dim{3}
	dFreq    = dim{0, 0, -1}
)

// baseUnits take SI prefixes; the rest do not.
var baseUnits = map[string]unit{
	"m": {1, dLength, 0}, "g": {1e-3, dMass, 0}, "s": {1, dTime, 0}, "A": {1, dCurrent, 0},
	"K": {1, dTemp, 0}, "mol": {1, dAmount, 0}, "cd": {1, dLum, 0},
	"J": {1, dEnergy, 0}, "N": {1, dForce, 0}, "W": {1, dPower, 0}, "Pa": {1, dPress, 0},
	"C": {1, dCharge, 0}, "V": {1, dVolt, 0}, "Ω": {1, dOhm, 0}, "ohm": {1, dOhm, 0}, "F": {1, dFarad, 0},
	"T": {1, dTesla, 0}, "H": {1, dHenry, 0}, "Wb": {1, dWeber, 0}, "S": {1, dSiemens, 0},
	"Hz": {1, dFreq, 0}, "L": {1e-3, dVolume, 0}, "l": {1e-3, dVolume, 0}, "eV": {1.602176634e-19, dEnergy, 0},
	"bar": {1e5, dPress, 0}, "M": {1e3, dim{-3, 0, 0, 0, 0, 1}, 0}, // M: molar, mol/L "cal": {4.184, dEnergy, 0}, "Da": {1.66053906660e-27, dMass, 0},
}

var plainUnits = map[string]unit{
	"min": {60, dTime, 0}, "h": {3600, dTime, 0}, "hr": {3600, dTime, 0}, "day": {86400, dTime, 0},
	"atm": {101325, dPress, 0}, "Torr": {101325.0 / 760, dPress, 0}, "torr": {101325.0 / 760, dPress, 0},
	"mmHg": {133.322387415, dPress, 0}, "psi": {6894.757293168, dPress, 0},
	"Å": {1e-10, dLength, 0}, "angstrom": {1e-10, dLength, 0}, "u": {1.66053906660e-27, dMass, 0}, "amu": {1.66053906660e-27, dMass, 0},
	"°C": {1, dTemp, 273.15}, "degC": {1, dTemp, 273.15}, "°F": {5.0 / 9, dTemp, 273.15 - 32*5.0/9},
	"in": {0.0254, dLength, 0}, "ft": {0.3048, dLength, 0}, "mi": {1609.344, dLength, 0}, "lb": {0.45359237, dMass, 0},
	"%": {0.01, dim{}, 0}, "rad": {1, dim{}, 0}, "°": {math.Pi / 180, dim{}, 0}, "deg": {math.Pi / 180, dim{}, 0},
	"M":    {1e3, dim{-3, 0, 0, 0, 0, 1}, 0}, // molar, mol/L
	"kcal": {4184, dEnergy, 0}, "kWh": {3.6e6, dEnergy, 0},
}

var prefixes = map[string]float64{
	"Y": 1e24, "Z": 1e21, "E": 1e18, "P": 1e15, "T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "h": 1e2, "da": 1e1,
	"d": 1e-1, "c": 1e-2, "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "u": 1e-6, "n": 1e-9, "p": 1e-12, "f": 1e-15, "a": 1e-18, "z": 1e-21, "y": 1e-24,
}

// lookupUnit reads one unit symbol, with an optional SI prefix.
func lookupUnit(sym string) (unit, bool) {
	if u, ok := plainUnits[sym]; ok {
		return u, true
	}
	if u, ok := baseUnits[sym]; ok {
		return u, true
	}
	for p, f := range prefixes {
		if rest, ok := strings.CutPrefix(sym, p); ok && rest != "" {
			if u, ok := baseUnits[rest]; ok {
				u.scale *= f
				return u, true
			}
		}
	}
	return unit{}, false
}

var (
	// A symbol and an optional ^exponent ("J1" is not J¹: digits after a
	// symbol without ^ are not a unit).
	unitTokenRe = regexp.MustCompile(`^([A-Za-zµμΩÅ°%]+)(?:\^\{?(-?\d+)\}?)?$`)
	// Font commands around units; their braces go with all others.
	latexUnitRe = regexp.MustCompile(`\\(?:mathrm|text|mathit|rm|operatorname)\s*`)
)

// parseUnit reads a unit expression: "kJ/mol", "m s^-2", "m/s^2",
// "J·K⁻¹", "\mathrm{kJ\,mol^{-1}}"; "" is dimensionless.
func parseUnit(s string) (unit, error) {
	s = latexUnitRe.ReplaceAllString(s, "")
	r := strings.NewReplacer(`\,`, " ", `\;`, " ", `\ `, " ", `\cdot`, " ", "·", " ", "*", " ", "⋅", " ", `\mu `, "µ", `\mu`, "µ",
		`\Omega`, "Ω", `\circ`, "°", "^\\circ", "°", "⁻¹", "^-1", "⁻²", "^-2", "⁻³", "^-3", "²", "^2", "³", "^3", "{", "", "}", "", "~", " ")
	s = strings.TrimSpace(r.Replace(s))
	s = strings.ReplaceAll(s, "^°", "°")
	u := unit{scale: 1}
	if s == "" {
		return u, nil
	}
	sign := int8(1)
	for _, part := range strings.Split(s, "/") {
		if strings.TrimSpace(part) == "" {
			return unit{}, fmt.Errorf("malformed unit %q", s)
		}
		for _, tok := range strings.Fields(part) {
			m := unitTokenRe.FindStringSubmatch(tok)
			if m == nil {
				return unit{}, fmt.Errorf("unknown unit %q", tok)
			}
			base, ok := lookupUnit(m[1])
			if !ok {
				return unit{}, fmt.Errorf("unknown unit %q", m[1])
			}
			exp := int8(1)
			if m[2] != "" {
				e, err := strconv.Atoi(m[2])
				if err != nil || e < -8 || e > 8 {
					return unit{}, fmt.Errorf("bad exponent in %q", tok)
				}
				exp = int8(e)
			}
			exp *= sign
			u.scale *= math.Pow(base.scale, float64(exp))
			for i := range u.dim {
				u.dim[i] += base.dim[i] * exp
			}
			if base.offset != 0 {
				u.offset = base.offset
			}
		}
		sign = -1 // everything after the first "/" divides
	}
	return u, nil
}

// Quantity is a parsed numeric answer.
type Quantity struct {
	Value   float64 // in SI base units
	Written float64 // the number as written, before its unit
	Scale   float64 // SI per written unit
	Dim     [7]int8
	SigFigs int // of the number as written (0 when not a plain decimal)
	HasUnit bool
	offset  float64
	Number  string // the number as written, for an exact comparison
	// Limited: written with a decimal point or an exponent, so it stands
	// for a measured value known to SigFigs figures; an integer ("1000000")
	// is exact.
	Limited bool
}

var (
	thousandsRe = regexp.MustCompile(`^-?\d{1,3}(,\d{3})+(\.\d+)?$`)
)

// ParseQuantity reads "3.2e5 J", "3.2 \times 10^{5}\,\mathrm{J}",
// "6.02·10²³ mol^-1", "25 °C", "1,234.5 kg", "-0.5". Units are optional.
func ParseQuantity(s string) (Quantity, error) {
	s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "$"))
	s = strings.TrimSuffix(s, ".")
	s = normalizeQuantity(s)
	num, unitStr := splitNumber(s)
	if num == "" {
		return Quantity{}, fmt.Errorf("no number in %q", s)
	}
	if thousandsRe.MatchString(num) {
		num = strings.ReplaceAll(num, ",", "")
	}
	e, err := mathans.ParseExpr(num)
	if err != nil {
		return Quantity{}, fmt.Errorf("number %q: %w", num, err)
	}
	if len(mathans.Vars(e)) > 0 {
		return Quantity{}, fmt.Errorf("%q is not a number", num)
	}
	v := e.Eval(nil)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Quantity{}, fmt.Errorf("%q is not a finite number", num)
	}
	u, err := parseUnit(unitStr)
	if err != nil {
		return Quantity{}, err
	}
	return Quantity{Value: v*u.scale + u.offset, Written: v, Scale: u.scale, Dim: u.dim, SigFigs: sigFigs(num), HasUnit: strings.TrimSpace(unitStr) != "",
		Number: num, Limited: limitedPrecision(num), offset: u.offset}, nil
}

// splitNumber cuts "3.2 \times 10^{5} kJ/mol" into the number and the unit.
func splitNumber(s string) (num, unitStr string) {
	// Walk tokens: a token belongs to the number while it is numeric
	// syntax; the first token that is a unit symbol starts the unit.
	i := 0
	for i < len(s) {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, `\times`), strings.HasPrefix(rest, `\cdot`):
			i += len(`\times`)
			if strings.HasPrefix(rest, `\cdot`) {
				i += len(`\cdot`) - len(`\times`)
			}
		case strings.HasPrefix(rest, `\frac`), strings.HasPrefix(rest, `\dfrac`), strings.HasPrefix(rest, `\sqrt`), strings.HasPrefix(rest, `\pi`):
			j := 1
			for j < len(rest) && (rest[j] >= 'a' && rest[j] <= 'z') {
				j++
			}
			i += j
		case rest[0] == '/' && startsNumber(strings.TrimLeft(rest[1:], " ")):
			i++ // a fraction, "1/2"
		case strings.ContainsRune("0123456789.+-*^{}() ,", rune(rest[0])):
			i++
		case (rest[0] == 'e' || rest[0] == 'E') && i > 0 && len(rest) > 1 && strings.ContainsRune("0123456789+-", rune(rest[1])) && strings.ContainsRune("0123456789.", rune(s[i-1])):
			i++
		case rest[0] == 'x' && i > 0 && strings.HasPrefix(strings.TrimLeft(rest[1:], " "), "10"):
			i++ // "3.2 x 10^5"
		default:
			return strings.TrimSpace(strings.ReplaceAll(s[:i], "x 10", `\times 10`)), strings.TrimSpace(s[i:])
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(s, "x 10", `\times 10`)), ""
}

// sigFigs counts the significant figures of a plain decimal mantissa
// ("0.00320" has 3, "3.2e5" 2, "1200" 2); 0 when it is not one.
func sigFigs(num string) int {
	m := strings.TrimSpace(num)
	// \times first: it has an "e" of its own.
	if i := strings.Index(m, `\times`); i >= 0 {
		m = m[:i]
	} else if i := strings.Index(m, `\cdot`); i >= 0 {
		m = m[:i]
	} else if i := strings.IndexAny(m, "eE"); i >= 0 {
		m = m[:i]
	}
	m = strings.TrimLeft(strings.TrimSpace(m), "+-")
	if m == "" || strings.Trim(m, "0123456789.") != "" {
		return 0
	}
	digits := strings.ReplaceAll(m, ".", "")
	digits = strings.TrimLeft(digits, "0")
	if !strings.Contains(m, ".") {
		digits = strings.TrimRight(digits, "0")
	}
	return max(len(digits), 1)
}

// NumericOptions set how close an answer must be.
type NumericOptions struct {
	// RelTol is a relative tolerance the task or deployment sets; zero
	// means none: the values must be equal.
	RelTol float64
	// SigFigs accepts answers within half a unit in the last significant
	// figure of the reference when the reference is written with limited
	// precision (a decimal point or an exponent: "3.2", "1.2e3", "1000.").
	SigFigs bool
}

// NumericEqual compares an answer with a reference: both parsed with
// units, converted to SI, dimensions equal (an answer without a unit is
// read in the reference's unit). With no tolerance that applies, the
// numbers compare by the math domain's exactness rules: distinct integers
// or terminating decimals are never equal (1000001 is not 1000000, 0 is
// not 6.626e-34), whatever a float would round them to.
func NumericEqual(answer, reference string, o NumericOptions) (bool, error) {
	ref, err := ParseQuantity(reference)
	if err != nil {
		return false, fmt.Errorf("reference: %w", err)
	}
	got, err := ParseQuantity(answer)
	if err != nil {
		return false, err
	}
	sameUnit := got.Scale == ref.Scale && got.offset == ref.offset
	if !got.HasUnit && ref.HasUnit {
		// A bare number is read in the reference's unit.
		got.Value, got.Dim, sameUnit = got.Written*ref.Scale+ref.offset, ref.Dim, true
	}
	if got.Dim != ref.Dim {
		return false, nil
	}
	allowed := o.RelTol * math.Abs(ref.Value)
	if o.SigFigs && ref.Limited && ref.SigFigs > 0 && ref.Written != 0 {
		// Half a unit in the last significant place of the reference as written.
		mag := math.Floor(math.Log10(math.Abs(ref.Written)))
		allowed = math.Max(allowed, 0.5*math.Pow(10, mag-float64(ref.SigFigs-1))*math.Abs(ref.Scale)*(1+1e-9))
	}
	if allowed > 0 {
		return math.Abs(got.Value-ref.Value) <= allowed, nil
	}
	if sameUnit {
		return mathans.EqualNumbers(got.Number, ref.Number), nil
	}
	// Different units: the conversion factors are floats, so equal values
	// agree to a float's precision, not exactly.
	return math.Abs(got.Value-ref.Value) <= 1e-12*math.Max(math.Abs(got.Value), math.Abs(ref.Value)), nil
}

// limitedPrecision: a decimal point or an exponent in the number as written.
func limitedPrecision(num string) bool {
	return strings.ContainsAny(num, ".eE") || strings.Contains(num, `\times`) || strings.Contains(num, `\cdot`)
}

// normalizeQuantity spells multiplication, powers and degrees one way.
var quantityReplacer = strings.NewReplacer("−", "-", "×", `\times `, "·", `\cdot `, "**", "^", "⁻", "-",
	`^{\circ}`, "°", `^\circ`, "°", `\circ`, "°", `\degree`, "°")

var degreeRe = regexp.MustCompile(`°\s+([CF])\b`)

func normalizeQuantity(s string) string {
	return degreeRe.ReplaceAllString(quantityReplacer.Replace(s), "°$1")
}

func startsNumber(s string) bool { return s != "" && strings.ContainsRune("0123456789({", rune(s[0])) }
