// A minimal torch.library surface (TORCH_LIBRARY, TORCH_LIBRARY_IMPL, TORCH_FN).
#ifndef OPBOT_STUB_TORCH_LIBRARY_H
#define OPBOT_STUB_TORCH_LIBRARY_H

#include <type_traits>

#include <ATen/ATen.h>

namespace c10 {
template <class FuncType, FuncType* func_ptr>
struct CompileTimeFunctionPointer {
    static_assert(std::is_function<FuncType>::value, "TORCH_FN takes a function");
};
}  // namespace c10

#define TORCH_FN(func) \
    (::c10::CompileTimeFunctionPointer<std::remove_pointer_t<std::remove_reference_t<decltype(func)>>, func>())

namespace torch {

class Library {
public:
    Library& def(const char* schema)
    {
        (void)schema;
        return *this;
    }
    template <typename Func>
    Library& impl(const char* name, Func&& func)
    {
        (void)name;
        (void)func;
        return *this;
    }
};

inline Library& StubLibrary()
{
    static Library library;
    return library;
}

}  // namespace torch

#define TORCH_LIBRARY(ns, m)                                                        \
    static void opbot_torch_library_init_##ns(torch::Library&);                    \
    [[maybe_unused]] static const int opbot_torch_library_##ns =                   \
        (opbot_torch_library_init_##ns(torch::StubLibrary()), 0);                  \
    void opbot_torch_library_init_##ns(torch::Library& m)

#define TORCH_LIBRARY_IMPL(ns, k, m)                                                \
    static_assert(::c10::DispatchKey::k == ::c10::DispatchKey::k, "dispatch key"); \
    static void opbot_torch_library_impl_##ns##_##k(torch::Library&);              \
    [[maybe_unused]] static const int opbot_torch_library_impl_##ns##_##k##_ =     \
        (opbot_torch_library_impl_##ns##_##k(torch::StubLibrary()), 0);            \
    void opbot_torch_library_impl_##ns##_##k(torch::Library& m)

#endif  // OPBOT_STUB_TORCH_LIBRARY_H
