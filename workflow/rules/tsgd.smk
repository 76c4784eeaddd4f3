# tsgd: placeholder; the rules land with the paper (methods/tsgd/).
