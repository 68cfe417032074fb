//! Tests of expressions on the CPU twin (written next).
