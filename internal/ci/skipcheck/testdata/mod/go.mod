module example.com/skipcheck

go 1.26
