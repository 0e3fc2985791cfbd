package main

import (
	"fmt"
	"strconv"
	"strings"
)

// ticketBody returns a JSON ticket of about size bytes with a list of comments, the shape of a
// typical tool call (canonical's benchmark body): about 6 values per 100 bytes.
func ticketBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"title":"Printer on floor 3 is out of toner","priority":2,"customer_id":"C-10293",` +
		`"labels":["hardware","printer","floor-3"],"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","comments":[`)
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"author":"agent-%d","score":%s,"text":"Checked the tray \u00e9 twice; still empty (%d).","resolved":%t,"parent":null}`,
			i, i%7, strconv.FormatFloat(float64(i)*1.25, 'g', -1, 64), i, i%2 == 0)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// graphqlBody returns a GraphQL request of about size bytes: a mutation of aliased fields, each
// with a string argument, under the value budget.
func graphqlBody(size int) []byte {
	var q strings.Builder
	q.WriteString("mutation Batch {")
	for i := 0; q.Len() < size-300; i++ {
		fmt.Fprintf(&q, ` t%d: createTicket(title: \"Printer on floor %d is out of toner; checked the tray twice, still empty; the order for a new cartridge went out on Monday\") { id }`, i, i)
	}
	q.WriteString("}")
	return []byte(`{"query":"` + q.String() + `","variables":{}}`)
}

// numbersBody returns a JSON array of about size bytes of one-digit numbers: twice as many values
// as bytes, over any sensible budget.
func numbersBody(size int) []byte {
	return []byte("[" + strings.Repeat("1,", size/2-1) + "1]")
}

// stringsBody returns a JSON array of about size bytes of 8-character strings: 11 bytes a value,
// the densest array under the default budget at 1 MiB.
func stringsBody(size int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; b.Len() < size-12; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%08d"`, i)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// fieldsBody returns a GraphQL request whose document is a query of n-2 short fields (n tokens):
// the most syntax tree per byte.
func fieldsBody(n int) []byte {
	var q strings.Builder
	q.WriteString(`{"query":"{`)
	for i := range n - 2 {
		fmt.Fprintf(&q, " f%d", i)
	}
	q.WriteString(`}"}`)
	return []byte(q.String())
}
