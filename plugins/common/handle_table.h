// Maps the opaque handles a plugin gives the host back to live objects.
// Lookups return a shared_ptr, so an object stays alive for the rest of a
// call even if another thread destroys its handle meanwhile, and a stale or
// foreign handle is reported as an error instead of being dereferenced.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace spora::plugin {

template <class T>
class HandleTable {
 public:
  void* add(std::shared_ptr<T> obj) {
    void* handle = obj.get();
    std::lock_guard<std::mutex> lock(mu_);
    map_.emplace(handle, std::move(obj));
    return handle;
  }
  std::shared_ptr<T> find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(handle);
    return it == map_.end() ? nullptr : it->second;
  }
  std::shared_ptr<T> remove(const void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(handle);
    if (it == map_.end()) return nullptr;
    std::shared_ptr<T> obj = std::move(it->second);
    map_.erase(it);
    return obj;
  }
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(map_.size());
    for (const auto& entry : map_) out.push_back(entry.second);
    return out;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<T>> map_;
};

}  // namespace spora::plugin
