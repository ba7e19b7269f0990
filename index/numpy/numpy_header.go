package numpy

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// A tiny parser for the Python literal in a .npy header: dicts, tuples,
// lists, strings, ints (Python 2 "2L" too), True/False/None. Anything else
// (a name, a call, an expression) is not a literal and is refused, so a
// header can never make anything run. Nesting is capped at MaxNesting.

type npyLit struct {
	s   string
	i   int
	err string
}

// npyParseLiteral parses s (the whole header text) as one literal.
func npyParseLiteral(s string) (any, error) {
	p := &npyLit{s: s}
	v := p.value(0)
	if p.err == "" {
		p.space()
		if p.i < len(p.s) {
			p.fail("unexpected %q after the literal", p.rest())
		}
	}
	if p.err != "" {
		return nil, fmt.Errorf("%s", p.err)
	}
	return v, nil
}

func (p *npyLit) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "..."
	}
	return r
}

func (p *npyLit) fail(format string, args ...any) {
	if p.err == "" {
		p.err = fmt.Sprintf("at header byte %d: ", p.i) + fmt.Sprintf(format, args...)
	}
}

func (p *npyLit) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n\f\v", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *npyLit) value(depth int) any {
	if p.err != "" {
		return nil
	}
	if depth > index.MaxNesting {
		p.fail("literal nests deeper than %d", index.MaxNesting)
		return nil
	}
	p.space()
	if p.i >= len(p.s) {
		p.fail("header ends inside the literal")
		return nil
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '(':
		return p.seq(depth, ')', true)
	case c == '[':
		return p.seq(depth, ']', false)
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.num()
	case c == 'b' && p.i+1 < len(p.s) && (p.s[p.i+1] == '\'' || p.s[p.i+1] == '"'):
		p.i++
		return p.str()
	case c == 'u' && p.i+1 < len(p.s) && (p.s[p.i+1] == '\'' || p.s[p.i+1] == '"'):
		p.i++ // Python 2 u'...'
		return p.str()
	default:
		j := p.i
		for j < len(p.s) && (p.s[j] == '_' || p.s[j] == '.' || (p.s[j]|0x20 >= 'a' && p.s[j]|0x20 <= 'z') || (p.s[j] >= '0' && p.s[j] <= '9')) {
			j++
		}
		switch word := p.s[p.i:j]; word {
		case "True":
			p.i = j
			return true
		case "False":
			p.i = j
			return false
		case "None":
			p.i = j
			return nil
		case "":
			p.fail("unexpected %q", p.rest())
		default:
			p.fail("%q is not a literal", pickle.Clip(word))
		}
		return nil
	}
}

// npyDict is a header dict in order, keys are strings.
type npyDict struct {
	keys []string
	vals []any
}

func (p *npyLit) dict(depth int) any {
	p.i++ // {
	d := &npyDict{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d
		}
		k := p.value(depth + 1)
		if p.err != "" {
			return nil
		}
		ks, ok := k.(string)
		if !ok {
			p.fail("dict key %v is not a string", k)
			return nil
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			p.fail("want ':' after dict key %q", ks)
			return nil
		}
		p.i++
		v := p.value(depth + 1)
		if p.err != "" {
			return nil
		}
		for _, old := range d.keys {
			if old == ks {
				p.fail("dict key %q appears twice", ks)
				return nil
			}
		}
		d.keys = append(d.keys, ks)
		d.vals = append(d.vals, v)
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d
		}
		p.fail("want ',' or '}' in dict, got %q", p.rest())
		return nil
	}
}

// npyTuple marks a parsed tuple (a list parses to []any).
type npyTuple []any

func (p *npyLit) seq(depth int, close byte, tuple bool) any {
	p.i++
	var items []any
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == close {
			p.i++
			break
		}
		v := p.value(depth + 1)
		if p.err != "" {
			return nil
		}
		items = append(items, v)
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == close {
			p.i++
			if tuple && len(items) == 1 && close == ')' {
				// "(x)" is x in Python, "(x,)" a tuple.
				return items[0]
			}
			break
		}
		p.fail("want ',' or %q, got %q", close, p.rest())
		return nil
	}
	if tuple {
		return npyTuple(items)
	}
	if items == nil {
		items = []any{}
	}
	return items
}

func (p *npyLit) str() any {
	q := p.s[p.i]
	j := p.i + 1
	var b []byte
	for j < len(p.s) && p.s[j] != q {
		if p.s[j] == '\\' && j+1 < len(p.s) {
			j++
			switch c := p.s[j]; c {
			case 'n':
				b = append(b, '\n')
			case 't':
				b = append(b, '\t')
			case 'r':
				b = append(b, '\r')
			default:
				b = append(b, c)
			}
			j++
			continue
		}
		b = append(b, p.s[j])
		j++
	}
	if j >= len(p.s) {
		p.fail("string is not closed")
		return nil
	}
	p.i = j + 1
	return string(b)
}

func (p *npyLit) num() any {
	j := p.i
	if p.s[j] == '-' || p.s[j] == '+' {
		j++
	}
	k := j
	for k < len(p.s) && p.s[k] >= '0' && p.s[k] <= '9' {
		k++
	}
	if k == j {
		p.fail("malformed number %q", p.rest())
		return nil
	}
	text := p.s[p.i:k]
	if k < len(p.s) && (p.s[k] == 'L' || p.s[k] == 'l') { // Python 2 long
		k++
	}
	if k < len(p.s) && (p.s[k] == '.' || p.s[k] == 'e' || p.s[k] == 'E' || p.s[k] == 'j' || p.s[k] == 'x') {
		p.fail("number %q is not a plain integer", p.rest())
		return nil
	}
	p.i = k
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n
	}
	if len(text) > 64 {
		p.fail("integer of %d digits", len(text))
		return nil
	}
	b, _ := new(big.Int).SetString(text, 10)
	return b
}
