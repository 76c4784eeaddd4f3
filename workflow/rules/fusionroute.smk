# fusionroute: placeholder; the rules land with the paper (methods/fusionroute/).
