// Package getopt parses command lines the way glibc's getopt_long(3) does, so that the
// sample apps accept exactly the spellings rdma-core's and perftest's tools accept:
// "-s 64", "-s64", "-ec" (bundled flags), "--size=64", "--size 64", and operands mixed
// with options (GNU permutation; "--" ends the options).
package getopt

import (
	"fmt"
	"strings"
)

// Option describes one option. Short is its letter (0: long only), Long its name
// ("" = short only), HasArg whether it takes an argument.
type Option struct {
	Short  rune
	Long   string
	HasArg bool
}

// Opt is one parsed option: Name is the long name if the option has one, else the
// short letter as a string; Arg is its argument ("" for flags).
type Opt struct {
	Name string
	Arg  string
}

// Parse parses args (without the program name) against opts and returns the options
// in command-line order and the operands.
func Parse(args []string, opts []Option) (parsed []Opt, operands []string, err error) {
	name := func(o Option) string {
		if o.Long != "" {
			return o.Long
		}
		return string(o.Short)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return parsed, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			body := a[2:]
			key, val, hasVal := strings.Cut(body, "=")
			var match *Option
			for j := range opts {
				if opts[j].Long == key {
					match = &opts[j]
					break
				}
			}
			if match == nil { // unique prefix, as getopt_long allows
				for j := range opts {
					if opts[j].Long != "" && strings.HasPrefix(opts[j].Long, key) {
						if match != nil {
							return nil, nil, fmt.Errorf("option '--%s' is ambiguous", key)
						}
						match = &opts[j]
					}
				}
			}
			if match == nil {
				return nil, nil, fmt.Errorf("unrecognized option '--%s'", key)
			}
			switch {
			case match.HasArg && !hasVal:
				if i+1 >= len(args) {
					return nil, nil, fmt.Errorf("option '--%s' requires an argument", match.Long)
				}
				i++
				val = args[i]
			case !match.HasArg && hasVal:
				return nil, nil, fmt.Errorf("option '--%s' doesn't allow an argument", match.Long)
			}
			parsed = append(parsed, Opt{Name: name(*match), Arg: val})
		case len(a) > 1 && a[0] == '-':
			rs := []rune(a[1:])
			for k := 0; k < len(rs); k++ {
				var match *Option
				for j := range opts {
					if opts[j].Short != 0 && opts[j].Short == rs[k] {
						match = &opts[j]
						break
					}
				}
				if match == nil {
					return nil, nil, fmt.Errorf("invalid option -- '%c'", rs[k])
				}
				if !match.HasArg {
					parsed = append(parsed, Opt{Name: name(*match)})
					continue
				}
				val := string(rs[k+1:])
				if val == "" {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("option requires an argument -- '%c'", rs[k])
					}
					i++
					val = args[i]
				}
				parsed = append(parsed, Opt{Name: name(*match), Arg: val})
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return parsed, operands, nil
}

// Arg is an option that takes an argument.
func Arg(short rune, long string) Option { return Option{Short: short, Long: long, HasArg: true} }

// Flag is an option without an argument.
func Flag(short rune, long string) Option { return Option{Short: short, Long: long} }
