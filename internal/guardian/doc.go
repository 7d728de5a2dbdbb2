package guardian

// Arg is the os.Args[1] of a guardian process: the reaper's Supervisor
// starts each guardian as [Options.GuardianPath, Arg].
const Arg = "__guardian"
