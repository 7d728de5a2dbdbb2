package store

import "syscall"

type syscallStat = syscall.Stat_t
