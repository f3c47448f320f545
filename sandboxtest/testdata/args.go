// args prints its arguments one a line, and who and where it runs as.
package main

import (
	"fmt"
	"os"
)

func main() {
	for _, a := range os.Args[1:] {
		fmt.Println(a)
	}
	wd, _ := os.Getwd()
	fmt.Printf("uid %d in %s\n", os.Getuid(), wd)
}
