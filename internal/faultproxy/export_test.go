package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// SplitReplies reads stream as the proxy reads a server's replies: how many replies answer
// commands, and how many are pushes. The stream must end at the end of a reply.
func SplitReplies(stream []byte) (replies, pushes int, err error) {
	rd := bufio.NewReader(bytes.NewReader(stream))
	for {
		if _, err := rd.Peek(1); errors.Is(err, io.EOF) {
			return replies, pushes, nil
		}
		_, push, err := readReply(rd)
		if err != nil {
			return replies, pushes, err
		}
		if push {
			pushes++
		} else {
			replies++
		}
	}
}
