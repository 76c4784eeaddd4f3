# efficient_dlm: placeholder; the rules land with the paper (methods/efficient_dlm/).
