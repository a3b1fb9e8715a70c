"""A correct submission: the three functions of the assignment."""


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a + b


def is_prime(n: int) -> bool:
    """Whether n is a prime number."""
    if n < 2:
        return False
    divisor = 2
    while divisor * divisor <= n:
        if n % divisor == 0:
            return False
        divisor += 1
    return True


def reverse_words(text: str) -> str:
    """The words of text in reverse order, separated by single spaces."""
    return " ".join(reversed(text.split()))
