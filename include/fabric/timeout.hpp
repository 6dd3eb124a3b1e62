#pragma once
// Timeouts of any std::chrono duration type, converted without overflow.
//
// The library's waits take nanoseconds. Converting hours::max() (or any count
// beyond ~292 years of nanoseconds) implicitly would overflow, which is
// undefined behaviour and in practice a deadline in the past; "wait forever"
// spelled the obvious way must wait forever instead.

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>

namespace fabric {

// `d` as nanoseconds: longer than nanoseconds::max() (or +inf) becomes
// nanoseconds::max(), which every wait treats as "no deadline"; zero,
// negative and NaN become zero (check once, do not wait).
template <typename Rep, typename Period>
constexpr std::chrono::nanoseconds saturating_nanoseconds(
    std::chrono::duration<Rep, Period> d) noexcept {
  using std::chrono::nanoseconds;
  if constexpr (std::is_same_v<Rep, nanoseconds::rep> && std::is_same_v<Period, std::nano>) {
    return d < nanoseconds::zero() ? nanoseconds::zero() : d;
  } else {
    // Decide in long double (no overflow, 64-bit mantissa on x86-64), a little
    // below the limit so that the exact conversion that follows cannot overflow.
    const long double ns =
        static_cast<long double>(d.count()) * Period::num * 1e9L / Period::den;
    if (!(ns > 0.0L)) return nanoseconds::zero();
    constexpr long double kLimit = 0.999L * static_cast<long double>(nanoseconds::max().count());
    if (ns >= kLimit) return nanoseconds::max();
    if constexpr (std::chrono::treat_as_floating_point_v<Rep>) {
      return nanoseconds(static_cast<nanoseconds::rep>(ns));
    } else {
      return std::chrono::duration_cast<nanoseconds>(d);
    }
  }
}

}  // namespace fabric
