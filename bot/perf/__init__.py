"""Performance numbers for the report: a sourced table of device peaks, the roofline of each
timed shape against them, and a mermaid chart of candidate, eager and compile times."""
