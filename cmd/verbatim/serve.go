package main

import (
	"fmt"
	"os"
)

func serveCmd(args []string) int {
	fmt.Fprintln(os.Stderr, "verbatim serve: broker not wired yet")
	return 2
}
