# memora: placeholder; the rules land with the paper (methods/memora/).
