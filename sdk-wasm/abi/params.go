package abi

import (
	"fmt"
	"math"
	"sort"
)

// CheckParam reports whether v is a value of the spec's type. Integers may arrive as any Go
// integer type (a decoded TOML table holds int64), floats as float64.
func CheckParam(spec ParamSpec, v any) error {
	var err error
	switch spec.Type {
	case ParamInt:
		_, err = ParamInt64(v)
	case ParamFloat:
		_, err = ParamFloat64(v)
	case ParamString:
		if _, ok := v.(string); !ok {
			err = fmt.Errorf("%v (%T) is not a string", v, v)
		}
	case ParamBool:
		if _, ok := v.(bool); !ok {
			err = fmt.Errorf("%v (%T) is not a bool", v, v)
		}
	default:
		err = fmt.Errorf("unknown param type %q", spec.Type)
	}
	return err
}

// CheckParams checks a [plugin.params] table against a plugin's specs: every key must be declared
// and every value of its declared type. Both the host (at bundle load) and the guest SDK (on
// every call) run it, so a typo in a manifest fails loudly instead of falling back to a default.
func CheckParams(specs []ParamSpec, params map[string]any) error {
	for _, k := range sortedKeys(params) {
		spec, ok := findParam(specs, k)
		if !ok {
			names := make([]string, len(specs))
			for i, s := range specs {
				names[i] = s.Name
			}
			return Failf(CodeInvalidParams, "unknown plugin param %q (this plugin reads %v)", k, names)
		}
		if err := CheckParam(spec, params[k]); err != nil {
			return Failf(CodeInvalidParams, "plugin param %s: want %s: %v", k, spec.Type, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func findParam(specs []ParamSpec, name string) (ParamSpec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return ParamSpec{}, false
}

// ParamInt64 converts an integer parameter value. A float64 is accepted only when integral
// (a JSON or TOML writer may have spelt 3136 as 3136.0).
func ParamInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
}

// ParamFloat64 converts a float parameter value; integers are accepted.
func ParamFloat64(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		if !finite(x) {
			return 0, fmt.Errorf("%v is not finite", x)
		}
		return x, nil
	case int, int32, int64:
		i, _ := ParamInt64(x)
		return float64(i), nil
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}
