#pragma once
// The default CPU layers (cnn.kernels = "onednn"): convolution, max pooling and ReLU through
// oneDNN primitives, fully connected layers through core/gemm.h (OpenBLAS). Internal to cnn/: use
// the make_* functions of layer.h.
//
// Activations stay the row-major Matrix of layer.h (NCHW, one sample per row). A convolution lets
// oneDNN choose its weight and activation layouts (blocked, e.g. nChw16c on AVX-512) and reorders
// at its boundaries when they differ; its primitives are built once per batch size and kept.
//
// Threads: oneDNN runs on the calling thread's OpenMP team (runtime.threads, core/gemm.h); each
// training thread has its own engine and stream. With a fixed thread count the results are the
// same on every run and every rank with the same CPU family.
#include <memory>
#include <string>

#include "sfb/cnn/layer.h"

namespace sfb::cnn {

std::unique_ptr<Layer> make_onednn_conv2d(Shape in, int out_channels, int kernel, int pad);
std::unique_ptr<Layer> make_onednn_relu(Shape in);
std::unique_ptr<Layer> make_onednn_maxpool(Shape in, int k);
std::unique_ptr<Layer> make_blas_linear(Shape in, int outputs);

// "oneDNN 2.6.3 (avx512_core)": the library and the instruction set its kernels use here.
std::string onednn_info();

}  // namespace sfb::cnn
