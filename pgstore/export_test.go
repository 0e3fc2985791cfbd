package pgstore

// Table is the schema-qualified records table of s, for the tests' own reads.
func Table(s *Store) string { return s.table }

func Migrations() []string { return migrations }
