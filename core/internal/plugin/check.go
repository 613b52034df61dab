package plugin

import (
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// requiredExports are the exports of ABI v1 and v2 (the same) with their signatures (params,
// results).
var requiredExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{abi.ExportInitialize, nil, nil},
	{abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}},
	{abi.ExportReset, nil, nil},
	{abi.ExportDescribe, nil, []api.ValueType{i64}},
	{abi.ExportPlan, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	{abi.ExportFrame, []api.ValueType{i32, i32}, []api.ValueType{i64}},
}

// checkModule refuses, with a readable reason, a module that is not a plugin of an ABI version
// this host speaks or that imports anything the sandbox does not provide. It returns the version
// of the module's marker: the highest ABI the module may describe itself as speaking.
func checkModule(name string, m wazero.CompiledModule) (int, error) {
	marker, err := markerVersion(name, m.ExportedFunctions())
	if err != nil {
		return 0, err
	}
	if err := checkExports(name, marker, m); err != nil {
		return 0, err
	}
	return marker, nil
}

// markerVersion finds the module's iris_abi_vN marker; a module with several takes the highest
// this host speaks.
func markerVersion(name string, exports map[string]api.FunctionDefinition) (int, error) {
	var versions []int
	for export := range exports {
		if v, ok := abi.MarkerVersion(export); ok {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return 0, fmt.Errorf("%w: %s exports no %s* marker: it is not an Iris plugin", ErrIncompatible, name, abi.MarkerPrefix)
	}
	slices.Sort(versions)
	for _, v := range slices.Backward(versions) {
		if v >= abi.MinVersion && v <= abi.Version {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: plugin %s speaks ABI v%d, this host speaks v%d to v%d", ErrIncompatible, name,
		versions[len(versions)-1], abi.MinVersion, abi.Version)
}

func checkExports(name string, marker int, m wazero.CompiledModule) error {
	exports := m.ExportedFunctions()
	for _, want := range requiredExports {
		f, ok := exports[want.name]
		if !ok {
			return fmt.Errorf("%w: plugin %s lacks the ABI v%d export %s", ErrIncompatible, name, marker, want.name)
		}
		if !slices.Equal(f.ParamTypes(), want.params) || !slices.Equal(f.ResultTypes(), want.results) {
			return fmt.Errorf("%w: plugin %s exports %s%s, ABI v%d says %s%s", ErrIncompatible, name,
				want.name, signature(f.ParamTypes(), f.ResultTypes()), marker, want.name, signature(want.params, want.results))
		}
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("%w: plugin %s exports no memory", ErrIncompatible, name)
	}
	for _, f := range m.ImportedFunctions() {
		mod, fn, _ := f.Import()
		if mod != wasi_snapshot_preview1.ModuleName {
			return fmt.Errorf("%w: plugin %s imports %s.%s; the sandbox provides only %s", ErrIncompatible, name, mod, fn, wasi_snapshot_preview1.ModuleName)
		}
	}
	for _, mem := range m.ImportedMemories() {
		mod, n, _ := mem.Import()
		return fmt.Errorf("%w: plugin %s imports memory %s.%s; plugins own their memory", ErrIncompatible, name, mod, n)
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := ""
		for i, t := range ts {
			if i > 0 {
				s += ", "
			}
			s += api.ValueTypeName(t)
		}
		return s
	}
	return "(" + names(params) + ") -> (" + names(results) + ")"
}
