#!/bin/sh
# Rebuilds instruction_types.elf, the DWARF the instruction-typing tests read
# (userland/analysis/src/debuginfo/instruction_types/tests.rs). Committed so that the tests do
# not depend on the compiler's version: their ips and location lists are this build's.
# Built with Debian 12's gcc 12.2.0.
set -eu
cd "$(dirname "$0")"
gcc -O2 -gdwarf-5 -fno-pie -no-pie -nostdlib -static -fno-asynchronous-unwind-tables \
	-Wl,--build-id=none -o instruction_types.elf instruction_types.c
