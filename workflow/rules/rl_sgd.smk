# rl_sgd: placeholder; the rules land with the paper (methods/rl_sgd/).
