# Source this for a cuda-tagged go build/vet/test by hand (the just recipes set the same):
#   . scripts/gpu/env.sh && go build -tags cuda ./...
# The compat header directory comes first: it #include_next's CUDA 13's cuda.h.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CGO_CFLAGS="-I$_root/core/internal/ml/cuda/gpu/cudacompat -I$_root/.build/cuda/include -I$_root/.build/cuda/include/cccl"
export CGO_LDFLAGS="-L$_root/.build/lib -L$_root/.build/cuda/stubs"
unset _root
