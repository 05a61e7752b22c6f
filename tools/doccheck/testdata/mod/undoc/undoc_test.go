package undoc

// Test files are not read.
func BareTestHelper() {}
