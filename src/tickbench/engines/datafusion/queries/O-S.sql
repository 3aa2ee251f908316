SELECT ts,
       least(a1price, a2price, a3price, a4price, a5price, a6price, a7price, a8price, a9price, a10price, a11price, a12price, a13price, a14price, a15price, a16price, a17price, a18price, a19price, a20price)
     - greatest(b1price, b2price, b3price, b4price, b5price, b6price, b7price, b8price, b9price, b10price, b11price, b12price, b13price, b14price, b15price, b16price, b17price, b18price, b19price, b20price) AS spread
FROM book
WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
ORDER BY ts;
