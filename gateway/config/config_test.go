package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iris-vlm/iris/core"
)

func TestExampleIsTheDefault(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "configs", "gateway.example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// The example spells out empty lists; the defaults leave them nil.
	cfg.Server.TrustedProxies, cfg.Server.RemoteImages.AllowHosts, cfg.Runtime.Bundles = nil, nil, nil
	if def := Default(); !reflect.DeepEqual(cfg, def) {
		t.Fatalf("the example file is not the defaults:\n got %+v\nwant %+v", cfg, def)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "empty file takes defaults", src: "", check: func(t *testing.T, c Config) {
			if c.Server.MaxBodyBytes != 32<<20 || c.Server.Addr != "127.0.0.1:8080" || c.Runtime.QueueDepth != core.DefaultQueueDepth {
				t.Errorf("defaults %+v", c)
			}
		}},
		{name: "overrides", src: "[server]\naddr = \":9000\"\nrequest_timeout = \"0s\"\n[server.remote_images]\nallow_hosts = [\"img.example.com\"]\n[runtime]\nbundles = [\"/b\"]\nworkers = 2",
			check: func(t *testing.T, c Config) {
				if c.Server.Addr != ":9000" || c.Server.RequestTimeout != 0 || !c.Server.RemoteImages.Enabled() {
					t.Errorf("server %+v", c.Server)
				}
				if cc := c.Runtime.Core(); len(cc.Bundles) != 1 || cc.Workers != 2 || cc.QueueDepth != core.DefaultQueueDepth {
					t.Errorf("core config %+v", cc)
				}
				if c.Server.ShutdownTimeout != 30*time.Second {
					t.Errorf("an unset key lost its default: %s", c.Server.ShutdownTimeout)
				}
			}},
		{name: "engine switches reach core", src: "[runtime]\nfused_swiglu = true\nvision_lanes = 3\ndecode_apart = true\ndecode_by_request = true\ndecode_hold = \"8ms\"\ndecode_hold_rows = 24",
			check: func(t *testing.T, c Config) {
				if cc := c.Runtime.Core(); !cc.FusedSwiGLU || cc.VisionLanes != 3 || !cc.DecodeApart || !cc.DecodeByRequest || cc.DecodeHold != 8*time.Millisecond || cc.DecodeHoldRows != 24 || cc.VisionSerial {
					t.Errorf("core config %+v", cc)
				}
			}},
		{name: "decode hold by default", src: "[runtime]\nworkers = 8",
			check: func(t *testing.T, c Config) {
				if cc := c.Runtime.Core(); cc.DecodeHold != core.DefaultDecodeHold {
					t.Errorf("decode hold %v, want the default %v", cc.DecodeHold, core.DefaultDecodeHold)
				}
			}},
		{name: "decode hold off", src: "[runtime]\ndecode_hold = \"0s\"",
			check: func(t *testing.T, c Config) {
				if cc := c.Runtime.Core(); cc.DecodeHold >= 0 {
					t.Errorf("decode hold %v, want negative (never) for core", cc.DecodeHold)
				}
			}},
		{name: "negative decode hold", src: "[runtime]\ndecode_hold = \"-1ms\"", wantErr: "runtime.decode_hold: must be >= 0"},
		{name: "unknown key", src: "[server]\nmax_body_byte = 1", wantErr: `unknown key "server.max_body_byte"`},
		{name: "unknown table", src: "[auth]\nkey = 1", wantErr: `unknown key "auth"`},
		{name: "wrong type", src: "[server]\nmax_body_bytes = \"big\"", wantErr: "max_body_bytes"},
		{name: "bad duration", src: "[server]\nread_timeout = \"soon\"", wantErr: "soon"},
		{name: "bad addr", src: "[server]\naddr = \"8080\"", wantErr: "server.addr"},
		{name: "small body cap", src: "[server]\nmax_body_bytes = 10", wantErr: "server.max_body_bytes"},
		{name: "zero shutdown", src: "[server]\nshutdown_timeout = \"0s\"", wantErr: "server.shutdown_timeout"},
		{name: "negative request timeout", src: "[server]\nrequest_timeout = \"-1s\"", wantErr: "server.request_timeout"},
		{name: "bad proxy", src: "[server]\ntrusted_proxies = [\"proxy\"]", wantErr: "server.trusted_proxies"},
		{name: "bad allowed host", src: "[server.remote_images]\nallow_hosts = [\"https://x/\"]", wantErr: "allow_hosts"},
		{name: "zero workers", src: "[runtime]\nworkers = 0", wantErr: "runtime.workers"},
		{name: "negative queue", src: "[runtime]\nqueue_depth = -1", wantErr: "runtime.queue_depth"},
		{name: "negative vision patches", src: "[runtime]\nvision_patches = -1", wantErr: "runtime.vision_patches"},
		{name: "bad level", src: "[log]\nlevel = \"loud\"", wantErr: "log.level"},
		{name: "bad format", src: "[log]\nformat = \"xml\"", wantErr: "log.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}
