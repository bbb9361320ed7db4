// ASSERT_OK(expr): the Status (or Result) expr must be ok; its error is printed when it is not.
#pragma once

#include <gtest/gtest.h>

#define ASSERT_OK(expr)                          \
  do {                                           \
    auto st_ = (expr);                           \
    ASSERT_TRUE(st_.ok()) << st_.error().what(); \
  } while (0)
