#!/bin/sh
# The redistribution problems of the paper (Rink et al.), as `meshplan redistribute` commands.
# Add --baseline to compare with the XLA-style strategy, --run to execute on MPI (np = mesh size),
# --json for machine-readable output (docs/redistribute.md).
set -e

# Example 3.1 (factor decomposition): two alltoalls and one final allpermute, never a full gather
meshplan redistribute '[3{x}12,2{y}12]' '[2{y}12,3{x}12]' --mesh x=4,y=6 --baseline

# Examples 4.9 / 6.8 / 7.1: one merged alltoall over the sub-axes a_0,a_1,a_2
meshplan redistribute '[1{a}8,8]' '[8,1{a}8]' --mesh a=8 --baseline

# Figure 5 (mesh {x:4,y:4}), one problem per row
meshplan redistribute '[32{x,y}512,128]' '[512,8{x,y}128]' --mesh x=4,y=4
meshplan redistribute '[32{x}128,512,32{y}128]' '[128,32{x,y}512,128]' --mesh x=4,y=4
meshplan redistribute '[32{x}128,512,32{y}128]' '[128,128{y}512,128]' --mesh x=4,y=4

# Figure 3: redistributions that are a single permutation
meshplan redistribute '[32{x}128,16{y}64]' '[32{y}128,16{x}64]' --mesh x=4,y=4

# The pattern reported against XLA as needing a full gather: two alltoalls here (8 ranks)
meshplan redistribute '[16{y}32,16,16{x}64]' '[32,2{x,y}16,64]' --mesh x=4,y=2 --baseline --run
