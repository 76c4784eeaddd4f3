# verbalized_sampling: placeholder; the rules land with the paper (methods/verbalized_sampling/).
