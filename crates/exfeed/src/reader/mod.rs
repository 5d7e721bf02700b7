//! The minibatch reader: chunked, randomized, parallel, distributed and resumable.
