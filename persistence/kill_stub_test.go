package persistence_test

const killChildEnv = "NOMICORE_PERSISTENCE_KILL_CHILD"

func killChild(dir string) int { return 2 }
