module github.com/iris-vlm/iris/sdk-wasm

go 1.26
