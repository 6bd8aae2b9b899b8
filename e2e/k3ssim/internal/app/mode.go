package app

import "os"

func osMode(m uint32) os.FileMode { return os.FileMode(m) & os.ModePerm }
