# pse: placeholder; the rules land with the paper (methods/pse/).
