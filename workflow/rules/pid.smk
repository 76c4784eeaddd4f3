# pid: placeholder; the rules land with the paper (methods/pid/).
