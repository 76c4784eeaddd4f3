# scope: placeholder; the rules land with the paper (methods/scope/).
