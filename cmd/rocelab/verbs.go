package main

import "github.com/rocelab/rocelab/fabric/lab"

// verbsServices starts each lab host's verbs service inside its namespace.
var verbsServices func(*lab.Host, *lab.Lab) (lab.Closer, error)
