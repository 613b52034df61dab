module github.com/iris-vlm/iris/plugins

go 1.26

require github.com/iris-vlm/iris/sdk-wasm v0.0.0

replace github.com/iris-vlm/iris/sdk-wasm => ../sdk-wasm
