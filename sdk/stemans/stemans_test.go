package stemans

import (
	"fmt"
	"testing"
)

var fourOptions = []string{"2 m/s", "4 m/s", "Newton's second law", "none of the above"}

func TestChoice(t *testing.T) {
	cases := []struct {
		resp    string
		options []string
		letter  string
		method  string
	}{
		// \boxed{}
		{`So the answer is \boxed{C}.`, nil, "C", MethodBoxed},
		{`\boxed{(B)}`, nil, "B", MethodBoxed},
		{`\boxed{B.}`, nil, "B", MethodBoxed},
		{`\boxed{D: none of the above}`, fourOptions, "D", MethodBoxed},
		{`\boxed{\text{A}}`, nil, "A", MethodBoxed},
		{`\boxed{\textbf{J}}`, nil, "J", MethodBoxed},
		{`First \boxed{A}, then on reflection \boxed{C}`, nil, "C", MethodBoxed},
		{`\boxed{4 m/s}`, fourOptions, "B", MethodBoxed},
		{`\boxed{Newton's second law}`, fourOptions, "C", MethodBoxed},
		{`\boxed{newtons second law}`, fourOptions, "C", MethodBoxed},
		{`\boxed{ E }`, nil, "E", MethodBoxed},
		{`\boxed{[B]}`, nil, "B", MethodBoxed},
		{`\fbox{G}`, nil, "G", MethodBoxed},
		{`$\boxed{I}$`, nil, "I", MethodBoxed},
		{`\boxed{H}`, nil, "H", MethodBoxed},
		// "answer is" phrases
		{`Answer: C`, nil, "C", MethodAnswerIs},
		{`answer: (B)`, nil, "B", MethodAnswerIs},
		{`The answer is (D).`, nil, "D", MethodAnswerIs},
		{`the answer is D`, nil, "D", MethodAnswerIs},
		{`The correct answer is: A`, nil, "A", MethodAnswerIs},
		{`The correct option is B.`, nil, "B", MethodAnswerIs},
		{`Final Answer: E`, nil, "E", MethodAnswerIs},
		{`final answer - F`, nil, "F", MethodAnswerIs},
		{`So the answer would be C.`, nil, "C", MethodAnswerIs},
		{`The answer should be (A)`, nil, "A", MethodAnswerIs},
		{`ANSWER: J`, nil, "J", MethodAnswerIs},
		{`Answer: **B**`, nil, "B", MethodAnswerIs},
		{`The answer is [C].`, nil, "C", MethodAnswerIs},
		{"I think A is wrong.\nAnswer: B", nil, "B", MethodAnswerIs},
		{"Answer: A\n...wait. Answer: C", nil, "C", MethodAnswerIs},
		{`Correct choice is option D`, nil, "D", MethodAnswerIs},
		{`The answer is option B.`, nil, "B", MethodAnswerIs},
		{`answer=C`, nil, "C", MethodAnswerIs},
		{`Therefore the answer is (H)!`, nil, "H", MethodAnswerIs},
		{`Answer:C`, nil, "C", MethodAnswerIs},
		{`The answer is G;`, nil, "G", MethodAnswerIs},
		{`Answer: (I)`, nil, "I", MethodAnswerIs},
		{`The final answer is E.`, nil, "E", MethodAnswerIs},
		{`The answer is: B`, nil, "B", MethodAnswerIs},
		{`My answer is D`, nil, "D", MethodAnswerIs},
		// boxed beats a later "answer is"
		{`\boxed{A} ... the answer is B`, nil, "A", MethodBoxed},
		// last standalone letter
		{`I pick (C) after eliminating (A).`, nil, "A", MethodLetter},
		{"Eliminating the others leaves:\nC", nil, "C", MethodLetter},
		{"Reasoning...\n\n**B**", nil, "B", MethodLetter},
		{"Reasoning...\nD.", nil, "D", MethodLetter},
		{"Reasoning...\nE)", nil, "E", MethodLetter},
		{"(B) is plausible, but (D) fits best.", nil, "D", MethodLetter},
		{"Options considered.\n  A  ", nil, "A", MethodLetter},
		{"(J)", nil, "J", MethodLetter},
		{"F:", nil, "F", MethodLetter},
		// option text as the last line
		{"After computing the speed:\n4 m/s", fourOptions, "B", MethodText},
		{"None of the above.", fourOptions, "D", MethodText},
		{"It follows from\nNewton's Second Law", fourOptions, "C", MethodText},
		{"2 m/s", fourOptions, "A", MethodText},
		// letters outside the options are not answers
		{`\boxed{E}`, fourOptions, "", MethodNone},
		{`Answer: F`, fourOptions, "", MethodNone},
		{"(G)", fourOptions, "", MethodNone},
		{"H", fourOptions, "", MethodNone},
		// negatives: nothing committed to
		{``, nil, "", MethodNone},
		{`I am not sure.`, nil, "", MethodNone},
		{`A car moves at 4 m/s.`, nil, "", MethodNone},
		{`A is a letter, and so is B.`, nil, "", MethodNone},
		{`The answer is unclear.`, nil, "", MethodNone},
		{`Answer: maybe`, nil, "", MethodNone},
		{`\boxed{42}`, nil, "", MethodNone},
		{`\boxed{}`, nil, "", MethodNone},
		{`K`, nil, "", MethodNone},
		{`(K)`, nil, "", MethodNone},
		{`Answer: K`, nil, "", MethodNone},
		{`\boxed{K}`, nil, "", MethodNone},
		{`a`, nil, "", MethodNone},
		{`(a)`, nil, "", MethodNone},
		{`answer: a`, nil, "", MethodNone},
		{"5 m/s", fourOptions, "", MethodNone},
		{`\boxed{3 m/s}`, fourOptions, "", MethodNone},
		{"Both A and B seem right", nil, "", MethodNone},
		{"AB", nil, "", MethodNone},
		{"(AB)", nil, "", MethodNone},
		{"Answer: AB", nil, "", MethodNone},
		{"The answer is Avogadro's number.", nil, "", MethodNone},
		{"Choice of units matters.", nil, "", MethodNone},
		{"Option pricing is hard.", nil, "", MethodNone},
		{"answer is in the text above", nil, "", MethodNone},
		{"A.B.C.", nil, "", MethodNone},
		{"Bob said hi", nil, "", MethodNone},
		{"Vitamin C is needed.", nil, "", MethodNone},
	}
	// Shuffled options: the same text maps to its new letter.
	shuffled := []string{"none of the above", "Newton's second law", "4 m/s", "2 m/s"}
	cases = append(cases,
		struct {
			resp    string
			options []string
			letter  string
			method  string
		}{`\boxed{4 m/s}`, shuffled, "C", MethodBoxed},
		struct {
			resp    string
			options []string
			letter  string
			method  string
		}{"So:\n2 m/s", shuffled, "D", MethodText})
	// Every letter A-J through every answer form.
	for _, l := range Letters {
		for _, f := range []string{`\boxed{%c}`, `The answer is (%c).`, "Thus:\n%c"} {
			m := map[string]string{`\boxed{%c}`: MethodBoxed, `The answer is (%c).`: MethodAnswerIs, "Thus:\n%c": MethodLetter}[f]
			cases = append(cases, struct {
				resp    string
				options []string
				letter  string
				method  string
			}{fmt.Sprintf(f, l), nil, string(l), m})
		}
	}
	if len(cases) < 100 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.resp, func(t *testing.T) {
			l, m := Choice(c.resp, c.options)
			if l != c.letter || m != c.method {
				t.Fatalf("Choice(%q) = %q, %q; want %q, %q", c.resp, l, m, c.letter, c.method)
			}
		})
	}
}

func TestNumericEqual(t *testing.T) {
	cases := []struct {
		answer, ref string
		opts        NumericOptions
		want        bool
	}{
		// plain numbers, relative tolerance 1%
		{"3.2e5", "320000", NumericOptions{}, true},
		{"3.2 \\times 10^{5}", "3.2e5", NumericOptions{}, true},
		{"3.2 × 10^5", "3.2e5", NumericOptions{}, true},
		{"3.2·10⁵", "320000", NumericOptions{}, false}, // superscript digits are not read as an exponent
		{"3.2 x 10^5", "3.2e5", NumericOptions{}, true},
		{"3.2*10**5", "3.2e5", NumericOptions{}, true},
		{"1,234.5", "1234.5", NumericOptions{}, true},
		{"-0.5", "-1/2", NumericOptions{}, true},
		{"\\frac{1}{3}", "0.3333", NumericOptions{SigFigs: true}, true},
		{"\\frac{1}{3}", "0.3333", NumericOptions{}, false}, // exact: 0.3333 is not 1/3
		{"0.333", "1/3", NumericOptions{}, false},
		{"0.333333", "1/3", NumericOptions{}, true}, // six places stand for a repeating decimal, as in the math domain
		{"0.32", "1/3", NumericOptions{}, false},
		{"101", "100", NumericOptions{}, false},
		{"1000001", "1000000", NumericOptions{SigFigs: true}, false}, // an integer reference is exact
		{"0", "6.626 \\times 10^{-34}", NumericOptions{SigFigs: true}, false},
		{"101", "100", NumericOptions{RelTol: 0.01}, true},
		{"102", "100", NumericOptions{}, false},
		{"98.9", "100", NumericOptions{}, false},
		{"105", "100", NumericOptions{RelTol: 0.05}, true},
		{"106", "100", NumericOptions{RelTol: 0.05}, false},
		{"0", "0", NumericOptions{}, true},
		{"0.001", "0", NumericOptions{}, false},
		{"6.02e23", "6.022 \\times 10^{23}", NumericOptions{}, false},
		{"6.02e23", "6.022 \\times 10^{23}", NumericOptions{SigFigs: true}, false},
		{"6.02e23", "6.022 \\times 10^{23}", NumericOptions{RelTol: 0.01}, true},
		{"6.02e22", "6.022 \\times 10^{23}", NumericOptions{}, false},
		{"-273.15", "-273.15", NumericOptions{}, true},
		{"273.15", "-273.15", NumericOptions{}, false},
		{"$42$", "42", NumericOptions{}, true},
		{"42.", "42", NumericOptions{}, true},
		{"1e-9", "1.0e-9", NumericOptions{}, true},
		{"1.1e-9", "1.0e-9", NumericOptions{}, false},
		{"2\\pi", "6.2832", NumericOptions{SigFigs: true}, true},
		{"\\sqrt{2}", "1.41421", NumericOptions{SigFigs: true}, true},
		// significant figures of the reference
		{"3.3", "3.2", NumericOptions{SigFigs: true}, false},
		{"3.24", "3.2", NumericOptions{SigFigs: true}, true},
		{"3.26", "3.2", NumericOptions{SigFigs: true}, false},
		{"1250", "1.2e3", NumericOptions{SigFigs: true}, true},
		{"1260", "1.2e3", NumericOptions{SigFigs: true}, false},
		{"0.00324", "0.0032", NumericOptions{SigFigs: true}, true},
		{"0.0034", "0.0032", NumericOptions{SigFigs: true}, false},
		{"1000.04", "1000.0", NumericOptions{SigFigs: true}, true},
		{"6.6262 \\times 10^{-34}", "6.626 \\times 10^{-34}", NumericOptions{SigFigs: true}, true},
		{"6.627 \\times 10^{-34}", "6.626 \\times 10^{-34}", NumericOptions{SigFigs: true}, false},
		{"1000.06", "1000.0", NumericOptions{SigFigs: true}, false},
		{"3.249", "3.2", NumericOptions{SigFigs: true, RelTol: 1e-3}, true},
		{"3.251", "3.2", NumericOptions{SigFigs: true, RelTol: 1e-3}, false},
		// units: same unit, prefixes, conversions
		{"320 kJ", "3.2e5 J", NumericOptions{}, true},
		{"3.2e5 J", "320 kJ", NumericOptions{}, true},
		{"0.32 MJ", "320 kJ", NumericOptions{}, true},
		{"320 J", "320 kJ", NumericOptions{}, false},
		{"5 m/s", "18 km/h", NumericOptions{}, true},
		{"5 m s^-1", "5 m/s", NumericOptions{}, true},
		{"5 m\\,s^{-1}", "5 m/s", NumericOptions{}, true},
		{"9.8 m/s^2", "9.8 m s^-2", NumericOptions{}, true},
		{"9.8 m/s", "9.8 m/s^2", NumericOptions{}, false},
		{"1 atm", "101.325 kPa", NumericOptions{}, true},
		{"760 Torr", "1 atm", NumericOptions{}, true},
		{"1 bar", "1 atm", NumericOptions{}, false},
		{"25 °C", "298.15 K", NumericOptions{}, true},
		{"25 ^\\circ C", "298.15 K", NumericOptions{}, true},
		{"77 °F", "25 °C", NumericOptions{}, true},
		{"298.15 K", "25 °C", NumericOptions{}, true},
		{"298 K", "25 °C", NumericOptions{}, false},
		{"298 K", "25 °C", NumericOptions{RelTol: 0.01}, true},
		{"300 K", "25 °C", NumericOptions{RelTol: 0.01}, true},
		{"310 K", "25 °C", NumericOptions{}, false},
		{"1 eV", "1.602e-19 J", NumericOptions{SigFigs: true}, true},
		{"1 eV", "1 J", NumericOptions{}, false},
		{"500 nm", "5.0e-7 m", NumericOptions{}, true},
		{"5000 Å", "500 nm", NumericOptions{}, true},
		{"50 nm", "500 nm", NumericOptions{}, false},
		{"2.5 mL", "2.5e-3 L", NumericOptions{}, true},
		{"2.5 mL", "2.5 cm^3", NumericOptions{}, true},
		{"1 kcal", "4184 J", NumericOptions{}, true},
		{"1 kcal/mol", "4.184 kJ/mol", NumericOptions{}, true},
		{"4.184 kJ mol^-1", "1 kcal/mol", NumericOptions{}, true},
		{"4.184 kJ", "1 kcal/mol", NumericOptions{}, false},
		{"3 \\mathrm{kJ\\,mol^{-1}}", "3000 J/mol", NumericOptions{}, true},
		{"10 μF", "1e-5 F", NumericOptions{}, true},
		{"10 uF", "1e-5 F", NumericOptions{}, true},
		{"10 µF", "10 mF", NumericOptions{}, false},
		{"2 kΩ", "2000 ohm", NumericOptions{}, true},
		{"2 k\\Omega", "2000 Ω", NumericOptions{}, true},
		{"1 GHz", "1e9 Hz", NumericOptions{}, true},
		{"1 GHz", "1e9 s^-1", NumericOptions{}, true},
		{"0.5 M", "0.5 mol/L", NumericOptions{}, true},
		{"500 mM", "0.5 mol/L", NumericOptions{}, true},
		{"1 h", "3600 s", NumericOptions{}, true},
		{"90 min", "1.5 h", NumericOptions{}, true},
		{"1 min", "1 h", NumericOptions{}, false},
		{"12 in", "1 ft", NumericOptions{}, true},
		{"1 mi", "1.609 km", NumericOptions{SigFigs: true}, true},
		{"1 lb", "453.6 g", NumericOptions{SigFigs: true}, true},
		{"50 %", "0.5", NumericOptions{}, true},
		{"180 °", "3.14159 rad", NumericOptions{SigFigs: true}, true},
		{"1 N m", "1 J", NumericOptions{}, true},
		{"1 W s", "1 J", NumericOptions{}, true},
		{"1 V A", "1 W", NumericOptions{}, true},
		{"1 C/s", "1 A", NumericOptions{}, true},
		{"1 Pa m^3", "1 J", NumericOptions{}, true},
		{"1 T", "1 Wb/m^2", NumericOptions{}, true},
		{"12 g/mol", "0.012 kg/mol", NumericOptions{}, true},
		{"12 g", "0.012 kg/mol", NumericOptions{}, false},
		// a bare number is read in the reference's unit
		{"320", "320 kJ", NumericOptions{}, true},
		{"3.2e5", "320 kJ", NumericOptions{}, false},
		{"25", "25 °C", NumericOptions{}, true},
		// not numbers / unknown units
		{"abc", "3", NumericOptions{}, false},
		{"x + 1", "3", NumericOptions{}, false},
		{"3 furlongs", "3 m", NumericOptions{}, false},
		{"3200 J1", "3200 J", NumericOptions{}, false},
		{"2 m2", "2 m^2", NumericOptions{}, false},
		{"", "3", NumericOptions{}, false},
		{"3 m/s", "3", NumericOptions{}, false},
		{"5 / ", "5", NumericOptions{}, false},
	}
	if len(cases) < 100 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.answer+" vs "+c.ref, func(t *testing.T) {
			got, err := NumericEqual(c.answer, c.ref, c.opts)
			if got != c.want {
				t.Fatalf("NumericEqual(%q, %q, %+v) = %v (%v), want %v", c.answer, c.ref, c.opts, got, err, c.want)
			}
		})
	}
}

func TestFreeEqual(t *testing.T) {
	cases := []struct {
		answer, ref string
		want        bool
	}{
		{"Mitochondria", "mitochondria", true},
		{"the mitochondria.", "Mitochondria", false},
		{"\\text{oxygen}", "Oxygen", true},
		{"sodium chloride", "Sodium Chloride", true},
		{"sodium-chloride", "sodium chloride", true},
		{"NaCl", "sodium chloride", false},
		{"x^2+2x+1", "(x+1)^2", true},
		{"\\frac{1}{2}", "0.5", true},
		{"2", "3", false},
		{"", "oxygen", false},
		{"carbon dioxide", "carbon monoxide", false},
		{"mitochondria1", "mitochondria", false},
		{"mitochondria", "mitochondria1", false},
		{"2 mitochondria", "mitochondria", false},
		{"ab", "ba", false},
		{`2\sin(x)\cos(x)`, `\sin(2x)`, true},
		{`\sqrt{4}`, "2", true},
		{"x+y", "y+x", true},
	}
	for _, c := range cases {
		if got := FreeEqual(c.answer, c.ref); got != c.want {
			t.Errorf("FreeEqual(%q, %q) = %v, want %v", c.answer, c.ref, got, c.want)
		}
	}
}

func FuzzChoice(f *testing.F) {
	for _, s := range []string{`\boxed{C}`, "Answer: (B)", "x\nD.", "4 m/s", `\boxed{\text{A}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, m := Choice(s, fourOptions)
		if (l == "") != (m == MethodNone) || (l != "" && (len(l) != 1 || l[0] < 'A' || l[0] > 'D')) {
			t.Fatalf("Choice(%q) = %q, %q", s, l, m)
		}
	})
}

func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"3.2e5 J", "25 °C", `3 \mathrm{kJ\,mol^{-1}}`, "1,234.5 kg", "6.02·10²³ mol^-1", "m/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuantity(s)
		if err == nil && (q.Value != q.Value || q.Scale == 0) {
			t.Fatalf("ParseQuantity(%q) = %+v", s, q)
		}
	})
}
