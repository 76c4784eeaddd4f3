# dibjudge: placeholder; the rules land with the paper (methods/dibjudge/).
