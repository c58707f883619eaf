// Package c has no tests.
package c
