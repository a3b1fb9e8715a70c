"""A correct submission: copy standard input to standard output in upper case."""

import sys

for line in sys.stdin:
    sys.stdout.write(line.upper())
