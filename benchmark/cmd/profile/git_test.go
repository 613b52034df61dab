package profile

import (
	"fmt"
	"os/exec"
)

func runGit(dir string, args ...string) ([]byte, error) {
	return exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
}

func strconvFormat(f float64) string { return fmt.Sprintf("%.2f", f) }
