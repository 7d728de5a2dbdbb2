//go:build !linux

package egress

const childEnv = "ACPX_EGRESS_TEST_CHILD"

func childMain(string) {}
